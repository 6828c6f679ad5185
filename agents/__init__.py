"""Built-in agents. Each module is a plugin registered through the ``llm_gym`` entry-point group, exactly like a
third-party plugin; nothing in the core imports this package by name."""
