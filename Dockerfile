# The one image of compose.yaml: the web tier, the workers and the migrate step run it with their own commands.
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=evalsite.settings EVALSITE_VAR_DIR=/app/var \
    STATIC_ROOT=/app/staticfiles
COPY . .
# Static files are collected into the image (whitenoise serves them); the key is for that step only.
RUN pip install --no-cache-dir '.[server]' \
    && SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0
EXPOSE 8000
