"""`goosectl web`: the page an engineer keeps open beside the bay.

A separate, unprivileged process: it reads a running controller through its control
socket (state snapshots, `goosectl status --json`) and its SQLite journal read-only, and
serves one page with one Server-Sent Events stream. The real-time process never imports
this package (tests/test_import_directions.py), so killing it never touches control.
"""
