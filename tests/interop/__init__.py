"""Interop tests against independent peers (libiec61850, tshark)."""
