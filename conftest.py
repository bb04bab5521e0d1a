# The flipgate pytest plugin (entry point "flipgate", flipgate/plugin.py) does the work.
