"""Bytes only, no policy, no state machines: GOOSE codec, Ethernet transport, serial framing."""
