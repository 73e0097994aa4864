package frontend

import (
	"testing"

	"github.com/qsplice/qsplice/frontend/conf"
	"github.com/qsplice/qsplice/frontend/controller"
)

// The feedback section of a file reaches the controller, which builds
// its feedback listener from it.
func TestFeedbackConfigReachesController(t *testing.T) {
	f, err := conf.Load("conf/testdata/feedback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cc := ControllerConfig(fromFile(f))
	if cc.Feedback.Policy.Trees != 3 || cc.Feedback.Classifier.SessionCookie != "sid" || len(cc.Feedback.Policy.Classes) != 3 ||
		len(cc.Listeners) != 1 || cc.Listeners[0].Policy != "feedback" {
		t.Fatalf("controller config %+v", cc)
	}
	c, err := controller.New(cc, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Status(0).Feedback; st == nil || len(st.Classes) != 3 || st.Classes[0].Name != "gold" || st.G != 3 {
		t.Errorf("feedback status %+v", st)
	}
}
