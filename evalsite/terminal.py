"""Whether this process runs a terminal command: `evalsite run|validate`, `manage.py evalrun|evalvalidate`.

Those commands serve nothing and sign nothing, and must work in a bare checkout or a plain `pip install`:
the settings then ask for no SECRET_KEY and create no folder. evalsite.cli sets the flag before Django
reads the settings. It is a flag in this process, not an environment variable, so no web server or worker
can be started with it, and no process the CLI starts inherits it.
"""

active = False
