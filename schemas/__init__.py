"""Row models (pydantic, one docstring per field) and the Arrow schemas of every table."""
