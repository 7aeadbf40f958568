"""Raw Ethernet transport and test-namespace tests (most need root)."""
