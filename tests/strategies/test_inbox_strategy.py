"""The ``inbox`` strategy module (docs/STRATEGIES.md): delivery, its report and the pickup it joins."""
