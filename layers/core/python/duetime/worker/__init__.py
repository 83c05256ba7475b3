"""Worker runtime and handler registry (Lambda and `duetime worker`)."""
