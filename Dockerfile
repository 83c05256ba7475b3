# The ECS worker of the `long` job class: `duetime worker` with the DUETIME_* environment the stack sets.
# The stack builds it from a staged context (infra/handlers.py): this file, pyproject.toml, README.md,
# layers/ and the team's handler folder (context handlerPath) as `handlers/`.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md* ./
COPY layers ./layers
# The runtime dependencies only: `duetime worker` imports no moto (the `local` extra is for `duetime local`).
RUN pip install . && useradd --system --uid 10001 duetime
# The team's handler packages, importable by DUETIME_HANDLER_MODULES (e.g. billing.handlers).
ARG HANDLER_DIR=handlers
COPY ${HANDLER_DIR} /app/handlers
# What the handler packages need beyond duetime (the same requirements.txt the Lambda workers' layer installs).
RUN if [ -f /app/handlers/requirements.txt ]; then pip install -r /app/handlers/requirements.txt; fi
ENV PYTHONPATH=/app/handlers
USER duetime
CMD ["duetime", "worker", "--job-class", "long"]
