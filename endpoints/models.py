"""The model endpoints the admin defines; `name/model` in a suite picks one. Suites and runs both read them."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from engine.clients import EndpointConfig
from engine.cost import per_million


class Endpoint(models.Model):
    """A named OpenAI-compatible endpoint. `name/model` in a suite picks it.

    Names are unique across the site, whichever project an endpoint belongs to: pools, pauses and the
    workers' registry key on the name alone.
    """

    name = models.SlugField(
        max_length=50,
        unique=True,
        help_text='Used as the prefix in model references: "name/model-id". "mock" and "default" are reserved.',
    )
    project = models.ForeignKey(
        "projects.Project",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="endpoints",
        help_text="Empty: every project may use it. Set: only this project's suites and launches.",
    )
    base_url = models.URLField(max_length=500, help_text="e.g. https://openrouter.ai/api/v1")
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        default="OPENAI_API_KEY",
        blank=True,
        validators=[
            RegexValidator(r"^[A-Z_][A-Z0-9_]*$", "An environment variable name, e.g. OPENROUTER_API_KEY")
        ],
        help_text="The NAME of the environment variable holding the key (empty for an endpoint that needs none, "
        "e.g. a local server). Keys never live in the database.",
    )
    max_concurrency = models.PositiveIntegerField(
        default=10,
        validators=[MinValueValidator(1)],
        help_text="Conversations in flight at once, across runs.",
    )
    # Empty (None) is no price known, and so is 0 for both: runs on the endpoint then say their cost is
    # unknown rather than $0 (EndpointConfig.priced). A 0 beside a price set is that side being free.
    price_input = models.DecimalField(
        "input price",
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="USD per million prompt tokens. Leave both prices empty when they are not known: runs on "
        "this endpoint then show their cost as unknown, not $0 (0 for both reads the same).",
    )
    price_output = models.DecimalField(
        "output price",
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="USD per million completion tokens; empty: not known.",
    )
    timeout = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(3600)],
        help_text="Seconds one request may take before it is abandoned and retried (within its retry budget). "
        "A suite's request_timeout, and `evalsite run --timeout`, override it for their runs.",
    )
    string_only = models.BooleanField(
        default=False,
        help_text="Send the conversation as one [Role]: transcript string instead of a messages array.",
    )
    retry_seconds = models.FloatField(
        "retry for",
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="Seconds one model call keeps retrying rate limits, 5xx answers, timeouts and dropped "
        "connections, waits included, before its conversation errors. Empty: EVALSITE_RETRY_SECONDS "
        "(300 unless set).",
    )

    class Meta:
        db_table = "runs_endpoint"  # existing databases hold the rows in this table
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(name__in=["mock", "default"]), name="endpoint_name_not_reserved"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def serves(self, project_id: int | None) -> bool:
        """Whether a project's suites and launches may use it: a shared endpoint, or the project's own."""
        return self.project_id is None or self.project_id == project_id

    @property
    def prices(self) -> str:
        """Its prices as the admin's list shows them: "$0.15 / $0.60 per M", or "no prices" when none is known."""
        config = self.to_config()
        if not config.priced:
            return "no prices"
        return f"${per_million(config.price_input)} / ${per_million(config.price_output)} per M"

    def to_config(self) -> EndpointConfig:
        return EndpointConfig(
            name=self.name,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            max_concurrency=self.max_concurrency,
            price_input=float(self.price_input or 0),
            price_output=float(self.price_output or 0),
            timeout=self.timeout,
            retry_seconds=settings.EVALSITE_RETRY_SECONDS
            if self.retry_seconds is None
            else self.retry_seconds,
            retry_max_wait=settings.EVALSITE_RETRY_MAX_WAIT,
            max_retries=settings.EVALSITE_MAX_RETRIES,
            string_only=self.string_only,
        )
