"""Settings for mypy's Django plugin (``[tool.django-stubs]`` in pyproject.toml).

The example project's settings with a database URL given, so that type checking starts
no embedded PostgreSQL: the plugin imports the settings and never connects, and its
process would exit without stopping a server it had started.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgresql://typecheck@localhost/typecheck")

from example_project.settings import *  # noqa: F403
