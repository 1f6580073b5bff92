"""The CLI: thin typer commands that parse, call a library function and print."""
