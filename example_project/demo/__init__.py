"""The example project's demo app: the ``tulip_demo`` management command and its scenes."""
