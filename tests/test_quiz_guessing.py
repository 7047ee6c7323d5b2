"""A quiz must be answered from the content: no content-free rule (one letter, the longest or shortest option, the
most words, the most specific-sounding) may score above chance + 15 % of the questions on any week, every question
offers its options in the same form, and the keys are spread over the letters."""

import pytest

from autograder.quizzes import RULES, chance, guess_scores, questions
from autograder.spec import all_specs

WEEKS = sorted({s.assignment for s in all_specs() if s.quiz})


def _week(week):
    return [q for s in all_specs() if s.assignment == week and s.quiz for q in questions(s)]


@pytest.mark.parametrize("week", WEEKS)
def test_every_question_is_read_with_four_options_and_a_key(week):
    qs = _week(week)
    assert qs
    for q in qs:
        assert set(q.options) == {"a", "b", "c", "d"}, (q.slug, q.name, q.options)
        assert q.key in q.options, (q.slug, q.name, q.key)


@pytest.mark.parametrize("week", WEEKS)
def test_no_content_free_rule_beats_chance_by_more_than_15_percent(week):
    qs = _week(week)
    limit = chance(qs) + 0.15 * len(qs)
    scores = guess_scores(qs)
    assert set(scores) == set(RULES)
    over = {rule: n for rule, n in scores.items() if n > limit}
    assert not over, f"{week}: {over} of {len(qs)} questions (chance {chance(qs):.1f}, limit {limit:.1f})"


def test_the_rules_do_catch_a_guessable_quiz():
    """The check can fail: keys all b, or always the longest option, are caught."""
    from autograder.quizzes import Question

    opts = {"a": "one", "b": "a much longer option with detail: 16 bytes", "c": "two", "d": "four"}
    qs = [Question("s", f"q{i}", "b", opts) for i in range(10)]
    scores = guess_scores(qs)
    assert scores["always b"] == 10 and scores["longest"] == 10 and scores["most specific"] == 10
    assert max(scores.values()) > chance(qs) + 0.15 * len(qs)
