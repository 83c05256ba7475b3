"""The HTTP API of API.md, served by API Gateway on AWS and by `duetime local` on this machine."""
