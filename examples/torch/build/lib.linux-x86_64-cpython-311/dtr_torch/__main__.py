# SPDX-License-Identifier: Apache-2.0
"""``python3 -m dtr_torch`` runs the bench (same as ``python3 -m dtr_torch.bench``)."""
import sys

from .bench import main

sys.exit(main())
