"""The bootstrap of one emulated Lambda instance: a process of its own, standard library only.

Started as `python -S -I lambda_bootstrap.py <request fd> <response fd> <json of paths and handler>`, it sets
sys.path to exactly the given folders (the function's asset, its layers, the standard library, the runtime's
boto3), imports the handler's module (the cold start), and then serves invocations as Lambda's runtime does,
one at a time: a JSON line on the request pipe ({"event", "context"}), a JSON line back on the response pipe
({"result"} or {"error": {"errorType", "errorMessage", "stackTrace"}}); a line {"report": true} is answered
with the process's sys.path and the files of the modules it imported. A cold start that fails answers
{"initError": ...} and exits, as a Lambda init error does. stdout and stderr stay the function's log.

This file is run as a script from duetime's checkout, never imported from a layer: it must not import duetime.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback


class Context:
    """The context object Lambda passes to a Python handler (the attributes duetime and Powertools read)."""

    def __init__(self, given: dict) -> None:  # type: ignore[type-arg]
        self.function_name = given["function_name"]
        self.function_version = given.get("function_version", "$LATEST")
        self.invoked_function_arn = given["invoked_function_arn"]
        self.memory_limit_in_mb = given["memory_limit_in_mb"]
        self.aws_request_id = given["aws_request_id"]
        self.log_group_name = given.get("log_group_name", "")
        self.log_stream_name = given.get("log_stream_name", "")
        self._deadline = time.monotonic() + given["remaining_ms"] / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _error(exc: BaseException) -> dict:  # type: ignore[type-arg]
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__),
    }


def main() -> None:
    requests = os.fdopen(int(sys.argv[1]), "r", encoding="utf-8")
    responses = os.fdopen(int(sys.argv[2]), "w", encoding="utf-8")
    setup = json.loads(sys.argv[3])
    sys.path[:] = list(setup["path"])
    module_name, _, attribute = setup["handler"].rpartition(".")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except BaseException as exc:
        traceback.print_exc()
        responses.write(json.dumps({"initError": _error(exc)}) + "\n")
        responses.flush()
        sys.exit(1)
    responses.write(json.dumps({"ready": True}) + "\n")
    responses.flush()
    for line in requests:
        invocation = json.loads(line)
        if invocation.get("report"):  # what this instance imported, and from where (the tests' check of its path)
            # (this bootstrap is the runtime's own: /var/runtime/bootstrap.py on AWS)
            files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {"", __file__})
            responses.write(json.dumps({"result": {"path": sys.path, "files": files}}) + "\n")
            responses.flush()
            continue
        try:
            result = handler(invocation["event"], Context(invocation["context"]))
            answer = json.dumps({"result": result})
        except Exception as exc:  # the invocation's failure: the instance stays warm
            traceback.print_exc()
            answer = json.dumps({"error": _error(exc)})
        except BaseException as exc:  # SystemExit and the like: the runtime process dies with it
            responses.write(json.dumps({"error": _error(exc), "fatal": True}) + "\n")
            responses.flush()
            raise
        responses.write(answer + "\n")
        responses.flush()


if __name__ == "__main__":
    main()
