import sys

from belvedir_runner.runner import main

sys.exit(main(sys.argv[1:]))
