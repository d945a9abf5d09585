import sys

from belvedir.cli import main

sys.exit(main())
