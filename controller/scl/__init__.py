"""SCL as a first-class input: one IED of an SCL file as the controller config
(`config.py`, with a YAML overlay for what SCL cannot say), the `scl show` view
(`view.py`), and the wire checked against the SCL (`wire.py`)."""
