"""``manage.py`` commands of tulip_memory (``tulip_memory_reembed``)."""
