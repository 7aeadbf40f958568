"""SCL as a config source: one IED of an SCL file as the controller config
(`loader.py`, with a YAML overlay for what SCL cannot say), the `scl show` view
(`view.py`), and the wire checked against the SCL or a config (`wire.py`).

The SCL file itself is read by `protocols.scl` (XML to a typed model, no policy); this
package decides what it means for a bay controller and produces the models of
`controller.config`, with errors in the one format (file, field, reason).
"""
