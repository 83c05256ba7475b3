"""The HTTP API (docs/api.md), served by API Gateway on AWS and by `duetime local` on this machine."""
