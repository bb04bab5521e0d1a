"""What the tests share that is not a pytest fixture (tests/conftest.py holds those)."""
