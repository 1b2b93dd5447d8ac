package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redrive/redrive"
	"github.com/redrive/redrive/api"
	"github.com/redrive/redrive/auth"
	"github.com/redrive/redrive/avro"
	"github.com/redrive/redrive/intake"
	"github.com/redrive/redrive/jobs"
	"github.com/redrive/redrive/masking"
	"github.com/redrive/redrive/notify"
	"github.com/redrive/redrive/operator"
	"github.com/redrive/redrive/payload"
	"github.com/redrive/redrive/resend"
	"github.com/redrive/redrive/ticket"
	"github.com/redrive/redrive/web"
)

// operatorConfig is the part of `redrive serve`'s configuration that concerns resends, the REST
// API and the UI.
type operatorConfig struct {
	ServiceName string

	ResendInterval    time.Duration
	ResendBatch       int
	ResendConcurrency int
	ResendPartition   string
	RetryBase         time.Duration
	RetryMax          time.Duration
	RetryMaxAttempts  int
	ManualRate        float64

	HousekeepingInterval time.Duration
	ResolvedRetention    time.Duration
	PermanentRetention   time.Duration
	AuditRetention       time.Duration

	APITokens         string
	APITokenFile      string
	TrustedProxies    string
	ProxyUserHeader   string
	ProxyGroupsHeader string
	ProxyRoles        string
	InsecureNoAuth    bool

	UISessionKey    string
	UISecureCookies bool

	OIDC     oidcFlags
	OIDCName string

	MaskingRules string

	Jira jiraFlags

	RepairRole   string
	RepairTopics string

	WebhooksFile           string
	WebhooksAllowLinkLocal bool
	NotifyThreshold        int
	NotifyWindow           time.Duration
	PublicURL              string
}

// jiraFlags configure opening tickets from groups.
type jiraFlags struct {
	URL, User, Token, Project, IssueType, Summary, Description, LinkTemplate string
}

// oidcFlags are the OpenID Connect settings: sign-in for the UI, JWT bearer tokens for the API.
type oidcFlags struct {
	IssuerURL, ClientID, ClientSecret, RedirectURL, Audience, RolesClaim, Roles string
	ClockSkew                                                                   time.Duration
	Scopes, DefaultRole, PostLogoutURL                                          string
	KeysMaxAge, KeysRefetch, SessionMaxAge                                      time.Duration
}

// defineOperatorFlags registers the operator flags on ef; validate after parsing.
func defineOperatorFlags(ef *envFlags) func() (operatorConfig, []error) {
	b := resend.DefaultBackoff()
	serviceName := ef.String("service-name", "REDRIVE_SERVICE_NAME", "redrive", "this service's name, written to the jeap_eh_error_handling_service header of resent records")
	interval := ef.Duration("resend-interval", "REDRIVE_RESEND_INTERVAL", time.Second, "time between two scheduler rounds that resend due RETRY_PENDING failures; 0 disables automatic resends on this instance")
	batch := ef.Int("resend-batch", "REDRIVE_RESEND_BATCH", 500, "due failures one scheduler claim takes")
	concurrency := ef.Int("resend-concurrency", "REDRIVE_RESEND_CONCURRENCY", 4, "claimed batches one instance sends at once")
	partition := ef.String("resend-partition", "REDRIVE_RESEND_PARTITION", "key", "partition of a resent record: key (as a Java producer would choose it) or original")
	retryBase := ef.Duration("retry-base", "REDRIVE_RETRY_BASE", b.Base, "backoff of temporary failures: delay = base x 2^attempt")
	retryMax := ef.Duration("retry-max", "REDRIVE_RETRY_MAX", b.Max, "backoff cap")
	retryAttempts := ef.Int("retry-max-attempts", "REDRIVE_RETRY_MAX_ATTEMPTS", b.MaxAttempts, "failures of one message retried automatically; then PERMANENT with reason \"retries exhausted\"")
	manualRate := ef.Float("manual-resend-rate", "REDRIVE_MANUAL_RESEND_RATE", 200, "manual resends per second (token bucket)")
	hkInterval := ef.Duration("housekeeping-interval", "REDRIVE_HOUSEKEEPING_INTERVAL", 10*time.Minute, "time between two housekeeping runs; 0 disables housekeeping on this instance")
	resolved := ef.Duration("retention-resolved", "REDRIVE_RETENTION_RESOLVED", 30*24*time.Hour, "age at which RESENT and CLOSED failures are deleted")
	permanent := ef.Duration("retention-permanent", "REDRIVE_RETENTION_PERMANENT", 180*24*time.Hour, "age at which PERMANENT failures are deleted")
	audit := ef.Duration("retention-audit", "REDRIVE_RETENTION_AUDIT", 0, "age at which weeks of the audit log and of finished jobs' items are dropped; 0 keeps them")
	tokens := ef.String("api-tokens", "REDRIVE_API_TOKENS", "", "bearer tokens, comma-separated name:role:secret (role viewer, operator or admin; secret in plain text or sha256:<hex>)")
	tokenFile := ef.String("api-token-file", "REDRIVE_API_TOKEN_FILE", "", "file of bearer tokens, one name:role:secret per line")
	proxies := ef.String("api-trusted-proxies", "REDRIVE_API_TRUSTED_PROXIES", "", "addresses (IP or CIDR, comma-separated) of authenticating proxies whose user headers are believed")
	userHeader := ef.String("api-proxy-user-header", "REDRIVE_API_PROXY_USER_HEADER", "X-Forwarded-User", "header carrying the user behind a trusted proxy")
	groupsHeader := ef.String("api-proxy-groups-header", "REDRIVE_API_PROXY_GROUPS_HEADER", "X-Forwarded-Groups", "header carrying the user's groups behind a trusted proxy")
	proxyRoles := ef.String("api-proxy-roles", "REDRIVE_API_PROXY_ROLES", "", "group=role mappings for proxy users, comma-separated")
	insecure := ef.Bool("insecure-no-auth", "REDRIVE_INSECURE_NO_AUTH", false, "serve the API and UI without authentication, everyone an admin (demos only)")
	sessionKey := ef.String("ui-session-key", "REDRIVE_UI_SESSION_KEY", "", "hex key (at least 32 bytes) for the UI's CSRF tokens; give every instance the same; random when empty")
	secure := ef.Bool("ui-secure-cookies", "REDRIVE_UI_SECURE_COOKIES", false, "mark the UI's cookies Secure (set it behind a TLS-terminating proxy)")
	repairRole := ef.String("repair-role", "REDRIVE_REPAIR_ROLE", "admin", "role that may repair failures (edit and resend): operator or admin")
	repairTopics := ef.String("repair-topics", "REDRIVE_REPAIR_TOPICS", "", "topics a repair may send to besides the failure's original topic, comma-separated")
	jiraURL := ef.String("jira-url", "REDRIVE_JIRA_URL", "", "Jira's address (https://example.atlassian.net); enables opening tickets from groups")
	jiraUser := ef.String("jira-user", "REDRIVE_JIRA_USER", "", "Jira user for basic auth (Jira Cloud: the account's e-mail); empty: the token is a bearer token")
	jiraToken := ef.String("jira-token", "REDRIVE_JIRA_TOKEN", "", "Jira API token (with -jira-user) or personal access token")
	jiraProject := ef.String("jira-project", "REDRIVE_JIRA_PROJECT", "", "Jira project key of the tickets")
	jiraType := ef.String("jira-issue-type", "REDRIVE_JIRA_ISSUE_TYPE", "Bug", "Jira issue type of the tickets")
	jiraSummary := ef.String("jira-summary", "REDRIVE_JIRA_SUMMARY", ticket.DefaultSummary, "summary template of a ticket ({group_id}, {service}, {source}, {message_type}, {error_code}, {count}, {link}, …)")
	jiraDesc := ef.String("jira-description", "REDRIVE_JIRA_DESCRIPTION", "{count} failures of {message_type} in {service} ({error_code}), first seen {first_seen}, last seen {last_seen}.\\n{link}", "description template of a ticket")
	ticketLink := ef.String("ticket-url-template", "REDRIVE_TICKET_URL_TEMPLATE", "", "address of a group's ticket in any tracker, e.g. https://tracker.example/browse/{ticket}")
	webhooks := ef.String("webhooks-file", "REDRIVE_WEBHOOKS_FILE", "", "file of outgoing webhooks (NAME URL [events=…] [format=json|slack] [secret=env:VAR|file:PATH] per line)")
	allowLinkLocal := ef.Bool("webhooks-allow-link-local", "REDRIVE_WEBHOOKS_ALLOW_LINK_LOCAL", false, "let webhooks reach link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal, …), refused otherwise")
	threshold := ef.Int("notify-threshold", "REDRIVE_NOTIFY_THRESHOLD", 100, "failures of one group within the notify window that make a group.threshold notification; negative disables")
	window := ef.Duration("notify-window", "REDRIVE_NOTIFY_WINDOW", 10*time.Minute, "window of the group.threshold notification")
	publicURL := ef.String("public-url", "REDRIVE_PUBLIC_URL", "", "the UI's public address (https://redrive.example), for links in notifications and tickets")
	maskingRules := ef.String("masking-rules", "REDRIVE_MASKING_RULES", "", "file of masking rules (TOPIC-PATTERN json|header|value [TARGET] per line) applied to every payload view")
	oidcIssuer := ef.String("oidc-issuer-url", "REDRIVE_OIDC_ISSUER_URL", "", "OpenID Connect issuer (discovery at ISSUER/.well-known/openid-configuration); enables UI sign-in and JWT bearer tokens on the API")
	oidcClient := ef.String("oidc-client-id", "REDRIVE_OIDC_CLIENT_ID", "", "OpenID Connect client id of redrive")
	oidcSecret := ef.String("oidc-client-secret", "REDRIVE_OIDC_CLIENT_SECRET", "", "OpenID Connect client secret (empty for a public client)")
	oidcRedirect := ef.String("oidc-redirect-url", "REDRIVE_OIDC_REDIRECT_URL", "", "the UI's sign-in callback as the provider knows it, e.g. https://redrive.example/auth/callback")
	oidcAudience := ef.String("oidc-audience", "REDRIVE_OIDC_AUDIENCE", "", "audience that API bearer tokens must name; empty: the client id")
	oidcClaim := ef.String("oidc-roles-claim", "REDRIVE_OIDC_ROLES_CLAIM", auth.DefaultRolesClaim, "claim holding the user's groups or roles")
	oidcRoles := ef.String("oidc-roles", "REDRIVE_OIDC_ROLES", "", "value=role mappings of the roles claim, comma-separated")
	oidcName := ef.String("oidc-provider-name", "REDRIVE_OIDC_PROVIDER_NAME", "single sign-on", "the provider's name on the UI's sign-in button (\"Sign in with NAME\")")
	oidcSkew := ef.Duration("oidc-clock-skew", "REDRIVE_OIDC_CLOCK_SKEW", auth.DefaultClockSkew, "how far past its expiry (and before its nbf and iat) a token is still accepted; exactly this, at most 5m")
	oidcScopes := ef.String("oidc-scopes", "REDRIVE_OIDC_SCOPES", strings.Join(auth.DefaultScopes, " "), "scopes asked for at sign-in, space- or comma-separated (openid is always added; Dex and Okta need groups for the groups claim)")
	oidcDefaultRole := ef.String("oidc-default-role", "REDRIVE_OIDC_DEFAULT_ROLE", "", "role of an OIDC user whose claims map to none (viewer, operator or admin); empty: none, refused everything")
	oidcKeysMaxAge := ef.Duration("oidc-jwks-max-age", "REDRIVE_OIDC_JWKS_MAX_AGE", auth.DefaultKeysMaxAge, "longest time the provider's signing keys are used before they are fetched again (a shorter Cache-Control max-age wins); a withdrawn key is refused within it")
	oidcKeysRefetch := ef.Duration("oidc-jwks-refetch-interval", "REDRIVE_OIDC_JWKS_REFETCH_INTERVAL", auth.DefaultKeysRefetchInterval, "shortest time between two fetches of the keys caused by tokens with an unknown key id")
	oidcPostLogout := ef.String("oidc-post-logout-redirect-url", "REDRIVE_OIDC_POST_LOGOUT_REDIRECT_URL", "", "where the provider sends the browser after its sign-out (register it at the provider); empty: the sign-in page at the redirect URL's origin")
	sessionMaxAge := ef.Duration("ui-session-max-age", "REDRIVE_UI_SESSION_MAX_AGE", auth.DefaultSessionMaxAge, "longest life of a UI sign-in (token or OIDC; an OIDC one ends at the ID token's expiry when sooner), at most 168h")
	return func() (operatorConfig, []error) {
		c := operatorConfig{
			RepairRole: *repairRole, RepairTopics: *repairTopics,
			Jira: jiraFlags{URL: *jiraURL, User: *jiraUser, Token: *jiraToken, Project: *jiraProject, IssueType: *jiraType,
				Summary: *jiraSummary, Description: *jiraDesc, LinkTemplate: *ticketLink},
			MaskingRules: *maskingRules, WebhooksFile: *webhooks, WebhooksAllowLinkLocal: *allowLinkLocal, NotifyThreshold: *threshold, NotifyWindow: *window, PublicURL: *publicURL,
			OIDC: oidcFlags{IssuerURL: *oidcIssuer, ClientID: *oidcClient, ClientSecret: *oidcSecret, RedirectURL: *oidcRedirect,
				Audience: *oidcAudience, RolesClaim: *oidcClaim, Roles: *oidcRoles, ClockSkew: *oidcSkew,
				Scopes: *oidcScopes, DefaultRole: *oidcDefaultRole, PostLogoutURL: *oidcPostLogout,
				KeysMaxAge: *oidcKeysMaxAge, KeysRefetch: *oidcKeysRefetch, SessionMaxAge: *sessionMaxAge},
			OIDCName:    *oidcName,
			ServiceName: *serviceName, ResendInterval: *interval, ResendBatch: *batch, ResendConcurrency: *concurrency,
			ResendPartition: *partition, RetryBase: *retryBase, RetryMax: *retryMax, RetryMaxAttempts: *retryAttempts,
			ManualRate: *manualRate, HousekeepingInterval: *hkInterval, ResolvedRetention: *resolved, PermanentRetention: *permanent,
			AuditRetention: *audit,
			APITokens:      *tokens, APITokenFile: *tokenFile, TrustedProxies: *proxies, ProxyUserHeader: *userHeader,
			ProxyGroupsHeader: *groupsHeader, ProxyRoles: *proxyRoles, InsecureNoAuth: *insecure,
			UISessionKey: *sessionKey, UISecureCookies: *secure,
		}
		var errs []error
		bad := func(flagName, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s "+format, append([]any{ef.name(flagName)}, args...)...))
		}
		if strings.TrimSpace(c.ServiceName) == "" {
			bad("service-name", "is required")
		}
		if c.ResendInterval < 0 {
			bad("resend-interval", "is %s, want >= 0", c.ResendInterval)
		}
		if c.ResendBatch < 1 || c.ResendBatch > 10000 {
			bad("resend-batch", "is %d, want 1 to 10000", c.ResendBatch)
		}
		if c.ResendConcurrency < 1 || c.ResendConcurrency > 64 {
			bad("resend-concurrency", "is %d, want 1 to 64", c.ResendConcurrency)
		}
		if c.ResendPartition != "key" && c.ResendPartition != "original" {
			bad("resend-partition", "is %q, want key or original", c.ResendPartition)
		}
		if err := c.backoff().Validate(); err != nil {
			bad("retry-base", "/ REDRIVE_RETRY_MAX / REDRIVE_RETRY_MAX_ATTEMPTS: %v", err)
		}
		if c.RetryBase <= 0 || c.RetryMaxAttempts < 1 {
			bad("retry-base", "and REDRIVE_RETRY_MAX_ATTEMPTS must be > 0")
		}
		if c.ManualRate <= 0 {
			bad("manual-resend-rate", "is %g, want > 0", c.ManualRate)
		}
		if c.HousekeepingInterval < 0 {
			bad("housekeeping-interval", "is %s, want >= 0", c.HousekeepingInterval)
		}
		if c.ResolvedRetention < time.Hour {
			bad("retention-resolved", "is %s, want at least 1h", c.ResolvedRetention)
		}
		if c.PermanentRetention < time.Hour {
			bad("retention-permanent", "is %s, want at least 1h", c.PermanentRetention)
		}
		if c.AuditRetention != 0 && c.AuditRetention < 24*time.Hour {
			bad("retention-audit", "is %s, want 0 (keep) or at least 24h", c.AuditRetention)
		}
		if c.UISessionKey != "" {
			if k, err := hex.DecodeString(c.UISessionKey); err != nil || len(k) < 32 {
				bad("ui-session-key", "must be at least 32 bytes in hex (64 hex digits)")
			}
		}
		return c, errs
	}
}

func (c operatorConfig) backoff() resend.Backoff {
	return resend.Backoff{Base: c.RetryBase, Max: c.RetryMax, MaxAttempts: c.RetryMaxAttempts}
}

// authConfig builds the authentication of the API and the UI from the flags, reading the
// token file; log receives the OpenID Connect warnings.
func (c operatorConfig) authConfig(log *slog.Logger) (auth.Config, error) {
	cfg := auth.Config{
		ProxyUserHeader: c.ProxyUserHeader, ProxyGroupsHeader: c.ProxyGroupsHeader, InsecureNoAuth: c.InsecureNoAuth,
	}
	var errs []error
	tokens, err := auth.ParseTokens(c.APITokens)
	if err != nil {
		errs = append(errs, fmt.Errorf("REDRIVE_API_TOKENS (-api-tokens): %w", err))
	}
	cfg.Tokens = tokens
	if c.APITokenFile != "" {
		more, err := auth.LoadTokenFile(c.APITokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDRIVE_API_TOKEN_FILE (-api-token-file): %w", err))
		}
		cfg.Tokens = append(cfg.Tokens, more...)
	}
	if c.TrustedProxies != "" {
		if cfg.TrustedProxies, err = auth.ParseTrustedProxies(c.TrustedProxies); err != nil {
			errs = append(errs, fmt.Errorf("REDRIVE_API_TRUSTED_PROXIES (-api-trusted-proxies): %w", err))
		}
	}
	if c.ProxyRoles != "" {
		if cfg.ProxyRoles, err = auth.ParseProxyRoles(c.ProxyRoles); err != nil {
			errs = append(errs, fmt.Errorf("REDRIVE_API_PROXY_ROLES (-api-proxy-roles): %w", err))
		}
	}
	if o := c.OIDC; o.IssuerURL != "" || o.ClientID != "" {
		roles, err := auth.ParseProxyRoles(o.Roles)
		if err != nil {
			errs = append(errs, fmt.Errorf("REDRIVE_OIDC_ROLES (-oidc-roles): %w", err))
		}
		var def auth.Role
		if o.DefaultRole != "" {
			if def, err = auth.ParseRole(o.DefaultRole); err != nil {
				errs = append(errs, fmt.Errorf("REDRIVE_OIDC_DEFAULT_ROLE (-oidc-default-role): %w", err))
			}
		}
		cfg.OIDC, err = auth.NewOIDC(auth.OIDCConfig{IssuerURL: o.IssuerURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			RedirectURL: o.RedirectURL, Audience: o.Audience, RolesClaim: o.RolesClaim, RoleMapping: roles, ClockSkew: o.ClockSkew,
			Scopes: strings.Fields(strings.ReplaceAll(o.Scopes, ",", " ")), DefaultRole: def,
			KeysMaxAge: o.KeysMaxAge, KeysRefetchInterval: o.KeysRefetch, Logger: log})
		if err != nil {
			errs = append(errs, fmt.Errorf("REDRIVE_OIDC_* (-oidc-*): %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// buildOperators adds the resend scheduler (with housekeeping), the operator core with its job
// runner, and its two translators, the REST API at /api/v1/ and the UI at /, sharing one
// authenticator.
//
// Resends go to each failure's own cluster; reactivations to the cluster asked for; payloads
// are decoded with the schema registry of their failure's cluster (registries, by cluster name).
func (s *service) buildOperators(ctx context.Context, registries map[string]avro.Registry, reactivators map[string]*intake.Reactivator) error {
	oc := s.cfg.Operators
	authCfg, err := oc.authConfig(s.log)
	if err != nil {
		return err
	}
	authn, err := auth.NewAuthenticator(authCfg)
	if err != nil {
		return err
	}
	if authCfg.OIDC != nil {
		// An unreachable provider is retried on use: tokens and proxies keep working meanwhile.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := authCfg.OIDC.Check(cctx); err != nil {
			s.log.Warn("OpenID provider not reachable at startup; retried on use", "error", err)
		}
		cancel()
	}
	if authCfg.InsecureNoAuth && !authCfg.Enabled() {
		s.log.Warn("authentication is disabled (--insecure-no-auth): every request to the API and the UI acts as admin")
	}
	// An interval of 0 in the flags disables the part on this instance.
	hk := resend.HousekeepingConfig{
		Disable: oc.HousekeepingInterval == 0, Interval: oc.HousekeepingInterval,
		ResolvedAge: oc.ResolvedRetention, PermanentAge: oc.PermanentRetention, AuditAge: oc.AuditRetention,
	}
	rcfg := resend.Config{
		Store: s.store, Brokers: s.cfg.KafkaBootstrap, Producer: s.cfg.KafkaConfig, ServiceName: oc.ServiceName,
		DisableAutomatic: oc.ResendInterval == 0, Interval: oc.ResendInterval,
		BatchSize: oc.ResendBatch, Concurrency: oc.ResendConcurrency,
		Backoff: oc.backoff(), ManualRate: oc.ManualRate, Housekeeping: hk,
		Logger: s.log, Registerer: s.registry, TracerProvider: s.tracerProvider(),
		Clusters: s.cfg.resendClusters(), CrossCluster: s.cfg.CrossCluster, SendTimeout: s.cfg.resendSendTimeout,
	}
	if oc.ResendPartition == "original" {
		rcfg.Partitioning = resend.PartitionOriginal
	}
	sched, err := resend.New(rcfg)
	if err != nil {
		return fmt.Errorf("resend: %w", err)
	}
	s.components = append(s.components, component{name: "resend", run: sched.Run})
	s.clusterErr = sched.ClusterErr

	payloads, clusterPayloads, err := s.payloadDecoders(registries)
	if err != nil {
		return err
	}
	var rules *masking.Rules
	if oc.MaskingRules != "" {
		if rules, err = masking.Load(oc.MaskingRules); err != nil {
			return fmt.Errorf("REDRIVE_MASKING_RULES (-masking-rules): %w", err)
		}
		s.log.Info("masking rules loaded", "file", oc.MaskingRules, "rules", rules.Len())
	}
	openTicket, ticketURL, err := oc.tickets()
	if err != nil {
		return err
	}
	core, err := operator.New(operator.Config{
		OpenTicket: openTicket, TicketURL: ticketURL, RepairTopics: splitList(oc.RepairTopics),
		Store: s.store, Resender: sched.Resender(), Payloads: payloads, ClusterPayloads: clusterPayloads, Masking: rules, Logger: s.log, Registerer: s.registry,
		DeadLetterTopic: s.cfg.clusters()[0].DLTTopic, Clusters: clusterNames(s.cfg.clusters()),
		CrossCluster: sched.Resender().CrossClusterAllowed,
		Reactivate: func(ctx context.Context, r operator.ReactivateRequest) (*redrive.Reactivation, error) {
			re := reactivators[r.Cluster]
			if re == nil {
				return nil, fmt.Errorf("%w: cluster %q has no reactivator", operator.ErrUnavailable, r.Cluster)
			}
			return re.Start(ctx, intake.ReactivateRequest{Principal: r.Principal, Reason: r.Reason, Limit: r.Limit, UpToNow: r.UpToNow})
		},
	})
	if err != nil {
		return fmt.Errorf("operator core: %w", err)
	}
	runner, err := jobs.New(jobs.Config{Store: s.store, Publisher: sched.Resender(), Owner: sched.InstanceID() + "/jobs", Logger: s.log,
		TracerProvider: s.tracerProvider()})
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	s.components = append(s.components, component{name: "jobs", run: runner.Run})
	// The notifier runs without webhooks too: it takes the waiting events and drops them, so
	// that they do not pile up.
	var hooks []notify.Webhook
	if oc.WebhooksFile != "" {
		if hooks, err = notify.LoadWebhooks(oc.WebhooksFile); err != nil {
			return fmt.Errorf("REDRIVE_WEBHOOKS_FILE (-webhooks-file): %w", err)
		}
	}
	n, err := notify.New(notify.Config{Store: s.store, Webhooks: hooks, Threshold: oc.NotifyThreshold,
		Window: oc.NotifyWindow, BaseURL: oc.PublicURL, AllowLinkLocal: oc.WebhooksAllowLinkLocal, Logger: s.log})
	if errors.Is(err, notify.ErrBlockedTarget) {
		return fmt.Errorf("REDRIVE_WEBHOOKS_FILE (-webhooks-file): %w; REDRIVE_WEBHOOKS_ALLOW_LINK_LOCAL (-webhooks-allow-link-local) allows such targets", err)
	}
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	s.components = append(s.components, component{name: "notify", run: n.Run})
	if oc.RepairRole == "" {
		oc.RepairRole = "admin"
	}
	repairRole, err := auth.ParseRole(oc.RepairRole)
	if err != nil || repairRole < auth.RoleOperator {
		return fmt.Errorf("REDRIVE_REPAIR_ROLE (-repair-role): %q is not operator or admin", oc.RepairRole)
	}
	sessions, err := auth.NewSessions(auth.SessionsConfig{Store: s.store, MaxAge: oc.OIDC.SessionMaxAge})
	if err != nil {
		return fmt.Errorf("REDRIVE_UI_SESSION_MAX_AGE (-ui-session-max-age): %w", err)
	}
	apiHandler, err := api.New(api.Config{Core: core, Auth: authn, Logger: s.log, Registerer: s.registry, RepairRole: repairRole,
		Sessions: sessions, TracerProvider: s.tracerProvider()})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.mux.Handle(api.Prefix+"/", apiHandler)

	var key []byte
	if oc.UISessionKey != "" {
		key, _ = hex.DecodeString(oc.UISessionKey) // validated with the flags
	}
	ui, err := web.New(web.Config{
		Core: core, Auth: authn, SessionKey: key, SecureCookies: oc.UISecureCookies, Logger: s.log, RepairRole: repairRole,
		OIDC: authCfg.OIDC, OIDCName: oc.OIDCName, OIDCPostLogoutURL: oc.OIDC.PostLogoutURL, Sessions: sessions,
	})
	if err != nil {
		return fmt.Errorf("ui: %w", err)
	}
	s.mux.Handle("/", ui)
	return nil
}

// tickets builds the ticket functions of the core from the flags; nil ones when not configured.
func (c operatorConfig) tickets() (func(context.Context, *redrive.Group) (string, error), func(string) string, error) {
	var link func(string) string
	if c.Jira.LinkTemplate != "" {
		t, err := ticket.ParseTemplate("REDRIVE_TICKET_URL_TEMPLATE (-ticket-url-template)", c.Jira.LinkTemplate)
		if err != nil {
			return nil, nil, err
		}
		link = func(key string) string { return ticket.Link(t, key) }
	}
	if c.Jira.URL == "" {
		return nil, link, nil
	}
	summary, err := ticket.ParseTemplate("REDRIVE_JIRA_SUMMARY (-jira-summary)", c.Jira.Summary)
	if err != nil {
		return nil, nil, err
	}
	desc, err := ticket.ParseTemplate("REDRIVE_JIRA_DESCRIPTION (-jira-description)", strings.ReplaceAll(c.Jira.Description, `\n`, "\n"))
	if err != nil {
		return nil, nil, err
	}
	j, err := ticket.NewJira(ticket.JiraConfig{URL: c.Jira.URL, User: c.Jira.User, Token: c.Jira.Token, Project: c.Jira.Project,
		IssueType: c.Jira.IssueType, Summary: summary, Description: desc, BaseURL: c.PublicURL})
	if err != nil {
		return nil, nil, fmt.Errorf("REDRIVE_JIRA_* (-jira-*): %w", err)
	}
	return j.Create, link, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// payloadDecoders returns one payload decoder per cluster, each with the cluster's schema
// registry, and the first cluster's decoder, which decodes the payloads of any other cluster
// name. The configuration's in-process registry (the demo's) serves every cluster, so then one
// decoder serves them all.
func (s *service) payloadDecoders(registries map[string]avro.Registry) (*payload.Decoder, map[string]*payload.Decoder, error) {
	clusters := s.cfg.clusters()
	byCluster := make(map[string]*payload.Decoder, len(clusters))
	if s.cfg.registry != nil {
		d, err := payload.New(payload.Config{Registry: s.cfg.registry})
		if err != nil {
			return nil, nil, fmt.Errorf("payload decoder: %w", err)
		}
		for _, cl := range clusters {
			byCluster[cl.Name] = d
		}
		return d, byCluster, nil
	}
	for _, cl := range clusters {
		d, err := payload.New(payload.Config{Registry: registries[cl.Name]})
		if err != nil {
			return nil, nil, fmt.Errorf("payload decoder of cluster %s: %w", cl.Name, err)
		}
		byCluster[cl.Name] = d
	}
	return byCluster[clusters[0].Name], byCluster, nil
}
