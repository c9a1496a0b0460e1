import sys

from .face.launch import main

sys.exit(main())
