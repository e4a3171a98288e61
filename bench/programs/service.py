"""A python3 program that allocates like a service: builds records, serialises, parses and sorts
them, and indexes them by tag (every object through malloc under PYTHONMALLOC=malloc).
Usage: service.py RECORDS ROUNDS [--no-index]"""
import json
import random
import sys

records, rounds = int(sys.argv[1]), int(sys.argv[2])
with_index = "--no-index" not in sys.argv[3:]
random.seed(1)
docs = [{"id": i, "name": "user%d" % i, "tags": ["t%d" % random.randrange(50) for _ in range(8)],
         "score": random.random()} for i in range(records)]
index = {}
for _ in range(rounds):
    text = json.dumps(docs)
    docs = json.loads(text)
    docs = sorted(docs, key=lambda d: (d["score"], d["name"]))
    if with_index:
        index = {}
        for d in docs:
            for t in d["tags"]:
                index.setdefault(t, []).append(d["id"])
print(len(text), len(index))
