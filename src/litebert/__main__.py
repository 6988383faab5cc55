import sys

from litebert.cli import main

sys.exit(main())
