"""Tasks: the task record, the catalog and its loaders, splits, the built-in suite, reference solutions."""
