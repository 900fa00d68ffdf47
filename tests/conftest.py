"""Test-wide settings.

The example desks run on the embedded local model by default; the suite runs them on their
scripted policies (BATON_MODEL=scripted) and exercises the real model only in the tests marked
`local_model`, which build their models explicitly.
"""

from __future__ import annotations

import os

os.environ["BATON_MODEL"] = "scripted"
