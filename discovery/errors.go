package discovery

import "errors"

// Error is a refusal of the registry: a code the SDK knows and a text. Its message, on
// the wire too, is "<CODE>: <text>", as the Python service sends it.
type Error struct {
	Code string
	Text string
}

func (e *Error) Error() string { return e.Code + ": " + e.Text }

// Is matches any *Error of the same code, so errors.Is(err, ErrLeaseExpired) holds
// whatever the text.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// The codes, as sentinels for errors.Is.
var (
	ErrInvalidArgument    = &Error{Code: "INVALID_ARGUMENT"}
	ErrPermissionDenied   = &Error{Code: "PERMISSION_DENIED"}
	ErrLeaseExpired       = &Error{Code: "LEASE_EXPIRED"}
	ErrDescriptorConflict = &Error{Code: "DESCRIPTOR_CONFLICT"}
	ErrDependencyCycle    = &Error{Code: "DEPENDENCY_CYCLE"}
	ErrRegistryFull       = &Error{Code: "REGISTRY_FULL"}
	ErrRegistryBusy       = &Error{Code: "REGISTRY_BUSY"}
	ErrInstanceNotFound   = &Error{Code: "INSTANCE_NOT_FOUND"}
	ErrModuleNotFound     = &Error{Code: "MODULE_NOT_FOUND"}
	ErrIncompatible       = &Error{Code: "INCOMPATIBLE_MODULE"}
	ErrAgentNotFound      = &Error{Code: "AGENT_NOT_FOUND"}
	ErrModelNotFound      = &Error{Code: "MODEL_NOT_FOUND"}
	ErrModuleUnavailable  = &Error{Code: "MODULE_UNAVAILABLE"}
)

func refuse(code *Error, text string) *Error { return &Error{Code: code.Code, Text: text} }

// The texts the Python service sends; clients and the admin app match some of them.
const (
	textIdentity        = "Invalid module or instance identity"
	textRolloutID       = "Invalid rollout id"
	textRolloutModules  = "Invalid rollout modules"
	textLeaseToken      = "Lease token must contain 32 to 256 characters"
	textContract        = "Invalid contract or package version"
	textTooMany         = "Too many dependencies or agents"
	textDupDependencies = "Duplicate dependencies"
	textDependency      = "Invalid dependency"
	textDupAgents       = "Duplicate agents"
	textAgent           = "Invalid agent descriptor"
	textJobs            = "Too many or duplicate jobs"
	textJob             = "Invalid job descriptor"
	textModels          = "Too many or duplicate models"
	textModel           = "Invalid model descriptor"
	textRolloutMembers  = "Rollout members do not match"
	textReplicas        = "Replicas of a contract in one rollout must declare identical dependencies, agents, jobs and models"
	textCycle           = "Required modules form a cycle"
	textNotOwner        = "Registration belongs to another lease or caller"
	textIdentityChange  = "Registration identity cannot change"
	textFull            = "Registry supports at most 256 live instances"
	textTooLarge        = "Registry snapshot exceeds 512 KiB"
	textRenewExpired    = "Register a fresh instance after lease loss"
	textNotAdmin        = "Only platform administrators can evict registrations"
	textInstanceID      = "Invalid instance identity"
	textModuleArgs      = "Module identity and contract required"
	textPageSize        = "Page size must be 1..100"
	textProviderExpired = "Provider registration expired"
	textNotReady        = "Provider is not ready"
	textBusy            = "Concurrent registry updates; retry control operation"
)
