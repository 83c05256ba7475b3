"""The billing team's duetime handlers (an example of a handler folder: context handlerPath=examples/handlers)."""
