"""`evalsite`, the terminal commands: `evalsite run suite.yaml`, `evalsite validate suite.yaml`,
`evalsite import FILE ... --out suite.yaml`, `evalsite calibrate set.yaml`, `evalsite token`.

They run in a bare checkout or after a plain `pip install`, from any folder: no SECRET_KEY, no server, no
database (evalsite/terminal.py). `manage.py evalrun` and `manage.py evalvalidate` are the same commands
under Django's name (alias.py).
"""

from .main import main

__all__ = ["main"]
