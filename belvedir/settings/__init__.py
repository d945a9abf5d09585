"""Belvedir Benchmarks settings (DJANGO_SETTINGS_MODULE=belvedir.settings): one source, driven
by environment variables (belvedir/env.py's helpers stop the start-up on a bad value).

The settings are grouped by topic, a module each; a topic that needs another's value imports
it from there, and no setting is defined in two topics (tests/belvedir/test_settings_layout.py).
"""

from belvedir.settings.accounts import *  # noqa: F403
from belvedir.settings.api import *  # noqa: F403
from belvedir.settings.core import *  # noqa: F403
from belvedir.settings.database import *  # noqa: F403
from belvedir.settings.jobs import *  # noqa: F403
from belvedir.settings.model_router import *  # noqa: F403
from belvedir.settings.runs import *  # noqa: F403
from belvedir.settings.sandboxes import *  # noqa: F403
from belvedir.settings.security import *  # noqa: F403
