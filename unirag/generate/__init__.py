"""Generation: prompts (versioned files) and generation modes."""
