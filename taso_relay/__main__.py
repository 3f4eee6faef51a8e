"""`python -m taso_relay ...` runs the taso-relay command."""
import sys

from .cli import main

sys.exit(main())
