"""Second, independent verifier of the platform's webhook signatures: the Standard Webhooks
reference library (PyPI `standardwebhooks`). Reads a JSON list of
{"secret", "body", "headers"} on stdin; prints one line per item: "ok" or the error."""

import json
import sys

from standardwebhooks.webhooks import Webhook

for item in json.load(sys.stdin):
    try:
        Webhook(item["secret"]).verify(item["body"], item["headers"])
        print("ok")
    except Exception as e:  # report every failure by name, keep checking the others
        print(f"{type(e).__name__}: {e}")
