package sched

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCreditConfigErrors(t *testing.T) {
	ok := []CustomerSpec{{Name: "a", Reservation: 10}, {Name: "b", Reservation: 5}}
	with := func(spec CustomerSpec) []CustomerSpec { return append(append([]CustomerSpec{}, ok...), spec) }
	for _, tc := range []struct {
		cfg  CreditConfig
		want string
	}{
		{CreditConfig{Customers: with(CustomerSpec{Name: "c", Weight: -1})}, "sched: Customers[2].Weight: must be > 0"},
		{CreditConfig{Customers: with(CustomerSpec{Name: ""})}, "Customers[2].Name"},
		{CreditConfig{Customers: with(CustomerSpec{Name: "a"})}, `Customers[2].Name: "a" appears twice`},
		{CreditConfig{Customers: with(CustomerSpec{Name: "c", Reservation: -1})}, "Customers[2].Reservation"},
		{CreditConfig{Customers: with(CustomerSpec{Name: "c", Reservation: 10, Cap: 5})}, "Customers[2].Cap: must not be below Reservation"},
		{CreditConfig{Customers: with(CustomerSpec{Name: "c", QueueCap: -1})}, "Customers[2].QueueCap"},
		{CreditConfig{Customers: ok, Cycle: -1}, "sched: Cycle"},
		{CreditConfig{Customers: ok, DebtLimit: -time.Second}, "sched: DebtLimit"},
		{CreditConfig{Customers: ok, Default: "zz"}, `sched: Default: "zz"`},
	} {
		_, err := NewCredit(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewCredit: error %v, want one containing %q", err, tc.want)
		}
	}
	cfg := CreditConfig{Customers: ok}
	if _, err := NewCredit(cfg); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	if cfg.Customers[0].Weight != 0 || cfg.Cycle != 0 {
		t.Fatal("NewCredit wrote its defaults into the caller's config")
	}
}

func TestCreditUnknownCustomer(t *testing.T) {
	s := newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a"}}})
	if err := s.Enqueue(Request{Customer: "nobody"}, 0); !errors.Is(err, ErrUnknownCustomer) {
		t.Fatalf("unknown customer without a default class: %v", err)
	}
	s = newCreditT(t, CreditConfig{Customers: []CustomerSpec{{Name: "a"}, {Name: "free"}}, Default: "free"})
	if err := s.Enqueue(Request{ID: 7, Customer: "nobody", Host: "x.example"}, 0); err != nil {
		t.Fatal(err)
	}
	if r := next(t, s, 0); r.ID != 7 || r.Customer != "free" {
		t.Fatalf("got %+v, want request 7 charged to free", r)
	}
	if i, ok := s.CustomerIndex("free"); !ok || i != 1 {
		t.Fatalf("CustomerIndex(free) = %d, %v", i, ok)
	}
	if _, ok := s.CustomerIndex("nobody"); ok {
		t.Fatal("CustomerIndex found an unknown customer")
	}
	s.Complete("nobody", time.Second) // ignored, must not panic
	s.Refund("nobody")
}
