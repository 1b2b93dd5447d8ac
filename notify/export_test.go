package notify

// Steps of a batch at which SetCrash's function is called.
const (
	StepRelayed   = stepRelayed
	StepClaimed   = stepClaimed
	StepPosted    = stepPosted
	StepRecording = stepRecording
)

// SetCrash makes n call f at each step of a batch; an error from f stops the batch there, as a
// crash of the process would, with nothing cleaned up.
func SetCrash(n *Notifier, f func(step string) error) { n.crash = f }
