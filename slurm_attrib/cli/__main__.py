"""``python -m slurm_attrib.cli``: the same as the ``slurm-attrib`` command."""

import sys

from . import main

sys.exit(main())
