"""Words that are never evidence that a passage is about the scene.

Only function words and contentless generics: not one subject word (no taverns,
abbeys, keys, ships), because a stop list that holds subjects is how a search
stops finding "The Silver Key". The list grew from function words alone after
the reference measured a passage admitted into an orbital-mechanics scene on
the word "before"; matching is on the lower-cased surface form, before the
index's stemmer.
"""
from __future__ import annotations

__all__ = ["STOP_WORDS"]

_FUNCTION = """
a an the and or but nor so yet if then else than that this these those there here
i me my mine myself you your yours yourself yourselves he him his himself she her hers herself
it its itself we us our ours ourselves they them their theirs themselves one ones
who whom whose which what whatever whoever whichever when whenever where wherever why how
am is are was were be been being do does did doing done have has had having
will would shall should can could may might must ought
not no nothing none nobody noone neither either
of in on at by for with without within from to into onto upon off out over under
about above below between among through throughout during before after since until till
against along around across behind beyond beside besides toward towards via per
up down away back again further once
all any both each every few more most other others some such own same several many much
only just also very too quite rather really almost already still even ever never always often
sometimes perhaps maybe however therefore thus hence meanwhile otherwise instead
while whether although though because unless whereas
s t d ll m o re ve y don didn doesn isn aren wasn weren hasn haven hadn won wouldn shan shouldn
can't cannot couldn mustn needn mightn i'm i've i'd i'll you're you've you'd you'll he's she's it's
we're we've we'd we'll they're they've they'd they'll that's there's here's what's who's let's
isn't aren't wasn't weren't don't doesn't didn't won't wouldn't shouldn't couldn't hasn't haven't hadn't
"""

# Generic verbs, nouns and adverbs that appear in every scene and say nothing
# about what it is about.
_GENERIC = """
like unlike say says said saying tell tells told get gets got getting go goes went gone going
come comes came coming make makes made making take takes took taken see sees saw seen
know knows knew known think thinks thought want wants wanted need needs needed
seem seems seemed look looks looked looking turn turns turned turning try tries tried
give gives gave given put puts let lets begin began begun
thing things something anything everything someone anyone everyone somebody anybody everybody
way ways part parts side sides form forms kind kinds sort sorts lot lots bit
new first last next now then today yesterday tomorrow soon later yes okay ok oh ah
two three four five six seven eight nine ten
found find finds use used uses using
another else enough less least little own whole yet
"""

STOP_WORDS = frozenset((_FUNCTION + _GENERIC).split())
