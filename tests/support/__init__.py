"""Shared test support: peers, privileges, and paths to the shared real-world corpora."""
