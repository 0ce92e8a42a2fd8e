"""The tool's logic in plain CPython: python -m unittest discover -s tests"""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app  # noqa: E402
from longhand_tool import InvalidInput, outcome  # noqa: E402


class GreetTests(unittest.TestCase):
    def test_greets_by_name(self):
        self.assertEqual(app.greet(app.Greet(name="Ada")), {"greeting": "Hello, Ada!"})

    def test_a_call_returns_json_and_errors_are_values(self):
        self.assertEqual(outcome("greet", '{"name": "Ada"}'), ("ok", '{"greeting": "Hello, Ada!"}'))
        self.assertEqual(outcome("greet", '{"name": " "}'), ("invalid-input", "`name` is empty"))
        with self.assertRaises(InvalidInput):
            app.greet(app.Greet(name=""))


if __name__ == "__main__":
    unittest.main()
