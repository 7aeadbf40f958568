"""The receive rules: which frames of a subscription may reach the application, as data.

Classifying a frame (`classify.py`) says what it is; the gate says whether its values may
act (IEC 61850-7-1/8-1 Ed2.1). A subscription delivers only while its stream is valid:
not lost, confRev as expected, ndsCom FALSE, the configured data-set shape, the expected
source MAC (checked by the subscriber bank before a frame reaches its stream), and the
simulation rule of LPHD.Sim with the Ed2 per-subscription switch:

- the controller not in simulation mode: a simulated frame (`simulation` TRUE or the
  Reserved1 S-bit) never acts; it is counted and shown;
- in simulation mode: real frames act until the first simulated frame of the subscription
  arrives; from then on only the simulated stream acts (`SimSt` TRUE) until simulation
  mode is switched off, and the subscription goes back to the real stream.

A refusal is a short code, the LGOS `ErrSt` of the subscription while it lasts. The rules
are two lookups, checked on every frame: nothing here allocates or reads a clock.
"""

from __future__ import annotations

#: classification flag -> refusal code; checked in this order, the first present refuses
REFUSING_FLAGS: tuple[tuple[str, str], ...] = (
    ("confrev_mismatch", "confrev"),
    ("ndscom", "ndscom"),
    ("shape_mismatch", "shape"),
)

#: (frame is simulated, controller in simulation mode, subscription switched to the
#: simulated stream) -> refusal code, or None: the frame may act
SIMULATION: dict[tuple[bool, bool, bool], str | None] = {
    (False, False, False): None,
    (True, False, False): "simulation",
    (False, True, False): None,
    (True, True, False): None,  # the first accepted simulated frame switches the subscription
    (False, True, True): "sim_switch",
    (True, True, True): None,
    # switched but not in simulation mode cannot last: switching the mode off releases it
    (False, False, True): None,
    (True, False, True): "simulation",
}

#: refusal / ErrSt code -> what it means, for reports and `goosectl status`
ERR_TEXT: dict[str, str] = {
    "none": "valid",
    "no_data": "no valid frame yet",
    "never_received": "configured, and no frame of it received yet",
    "lost": "stream lost (timeAllowedToLive expired)",
    "confrev": "confRev differs from the expected one",
    "ndscom": "ndsCom TRUE: the publisher needs commissioning",
    "shape": "data set differs from the configured shape",
    "simulation": "simulated frame; the controller is not in simulation mode",
    "sim_switch": "real frame; the subscription takes the simulated stream",
    "foreign_source": "a second source for this gocbRef",
    "conflict": "two sequences or sources on one stream (a forgery, or two publishers)",
}


def refusal(flags: tuple[str, ...], simulated: bool, sim_mode: bool, switched: bool) -> str | None:
    """Why a frame with these classification flags may not act, or None if it may."""
    if flags:
        for flag, code in REFUSING_FLAGS:
            if flag in flags:
                return code
    return SIMULATION[(simulated, sim_mode, switched)]


def is_simulated(hdr) -> bool:
    """`simulation` TRUE or the S-bit: either marks a frame of a simulated stream."""
    return bool(hdr.simulation or hdr.reserved1 & 0x8000)
