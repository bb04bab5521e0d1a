"""flipgate's built-in suites: thin pytest modules, one folder per suite, each naming the suite it
runs (``SUITE = "<name>"``). Installed as the package ``flipgate_suites``, so a project of its own
runs them with ``pytest --pyargs flipgate_suites`` (what ``flipgate init`` configures)."""
