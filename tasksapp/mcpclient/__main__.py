import sys

from tasksapp.mcpclient.cli import main

sys.exit(main())
