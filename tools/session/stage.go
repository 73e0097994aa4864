package session

import "strconv"

// Stage is a page class of the shop, or Exit for the end of a session.
// The first eight are the request classes the scheduler's LIFO-Pri policy
// queues separately (four browsing classes, then four transactional ones).
type Stage int

// The stages in the order the Transitions matrix indexes them.
const (
	Main Stage = iota
	Browse
	Search
	Details
	Login
	Shipping
	Payment
	Confirm
	Exit

	// NumPages is the number of page classes, i.e. every stage but Exit.
	NumPages = int(Exit)
	// NumStages counts Exit too: the size of the Transitions matrix.
	NumStages = NumPages + 1
)

var stageNames = [NumStages]string{
	"main", "browse", "search", "details", "login", "shipping", "payment", "confirm", "exit",
}

var stagePaths = [NumPages]string{
	"/", "/browse", "/search", "/details", "/login", "/shipping", "/payment", "/confirm",
}

// String returns the lower-case name of the stage ("main", ..., "exit").
func (s Stage) String() string {
	if s < 0 || int(s) >= NumStages {
		return "Stage(" + strconv.Itoa(int(s)) + ")"
	}
	return stageNames[s]
}

// Path returns the URL path a client requests for the stage; Exit and
// out-of-range stages have none and return "".
func (s Stage) Path() string {
	if s < 0 || int(s) >= NumPages {
		return ""
	}
	return stagePaths[s]
}

// Transactional reports whether the stage is one of the four purchase
// pages (login, shipping, payment, confirm), which carry the high
// utilities in the LIFO-Pri experiment.
func (s Stage) Transactional() bool { return s >= Login && s <= Confirm }

// StageForPath maps a URL path back to its stage. The query string, if
// any, is ignored; ok is false for a path that is not one of the shop's.
func StageForPath(path string) (s Stage, ok bool) {
	for i := range len(path) {
		if path[i] == '?' {
			path = path[:i]
			break
		}
	}
	for i, p := range stagePaths {
		if p == path {
			return Stage(i), true
		}
	}
	return Exit, false
}
