"""`goosectl demo`: the scenario (goosectl's own publishers build the capture), the offline
demo on the virtual wire, and the live demo on veths.

With `controller.commands`, the only product code that may import `firmware_sim`, and
only through `simulator` (the module named for it), so the controller never depends on
the device it is tested against. May import everything in `controller` below it, and
`lab` for `demo --live` (loaded when asked for, never at import time).
"""
