"""Running grids: config and grid expansion, the runner (one writer), executors, the library entry point."""
