"""Pure building blocks every layer shares: names and namespaces, subjects, text and its
holographic vectors, JSON value checks, a context binding, a clock, an LRU map. No Django
database access here (import-linter enforces it)."""
